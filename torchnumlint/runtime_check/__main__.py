import sys

from torchnumlint.runtime_check.cli import main

if __name__ == "__main__":
    sys.exit(main())
