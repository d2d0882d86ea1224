"""Never lose user code: encodings, BOM, newlines and mode survive; writes are atomic and guarded."""

import codecs
import os
import stat

import pytest

from torchnumlint.source import SourceError, read_source, write_source


def test_utf8_bom_crlf_and_mode_survive_a_rewrite(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes(codecs.BOM_UTF8 + "x = 'é'\r\ny = 1\r\n".encode())
    os.chmod(path, 0o754)
    source = read_source(str(path))
    assert source.bom and source.text == "x = 'é'\r\ny = 1\r\n"
    write_source(source, source.text.replace("1", "2"))
    assert path.read_bytes() == codecs.BOM_UTF8 + "x = 'é'\r\ny = 2\r\n".encode()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o754
    assert [p.name for p in tmp_path.iterdir()] == ["m.py"]  # no temporary file left behind


def test_pep263_cookie_is_honoured_both_ways(tmp_path):
    path = tmp_path / "latin.py"
    raw = "# -*- coding: latin-1 -*-\nname = 'Müller'\n".encode("latin-1")
    path.write_bytes(raw)
    source = read_source(str(path))
    assert "Müller" in source.text and source.encoding == "iso-8859-1"
    write_source(source, source.text + "z = 1\n")
    assert path.read_bytes() == raw + b"z = 1\n"


@pytest.mark.parametrize(
    "raw, cause",
    [
        (b"x = 1\x00\n", "NUL byte"),
        (b"x = '\xff\xfe'\n", "cannot decode as utf-8"),
        (b"# -*- coding: klingon -*-\nx = 1\n", "cannot parse"),
    ],
)
def test_bad_bytes_give_one_clear_cause(tmp_path, raw, cause):
    path = tmp_path / "bad.py"
    path.write_bytes(raw)
    with pytest.raises(SourceError, match=cause):
        read_source(str(path))


def test_unreadable_file_is_an_error_not_a_traceback(tmp_path):
    with pytest.raises(SourceError, match="cannot read"):
        read_source(str(tmp_path / "missing.py"))


def test_a_file_changed_since_read_is_not_overwritten(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    source = read_source(str(path))
    path.write_text("x = 'edited in the editor'\n")
    with pytest.raises(SourceError, match="changed"):
        write_source(source, "x = 2\n")
    assert path.read_text() == "x = 'edited in the editor'\n"


def test_writes_go_through_a_symlink_to_its_target(tmp_path):
    target = tmp_path / "real.py"
    target.write_text("x = 1\n")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    write_source(read_source(str(link)), "x = 2\n")
    assert link.is_symlink() and target.read_text() == "x = 2\n"


def test_a_bom_with_another_cookie_is_refused_like_cpython_does(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes(codecs.BOM_UTF8 + b"# coding: latin-1\nx = 1\n")
    with pytest.raises(SourceError, match="encoding problem"):
        read_source(str(path))


def _source_file(tmp_path, name="m.py", text="x = 1\n"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("mode", [0o444, 0o400])
def test_a_read_only_file_is_not_written_even_by_root(tmp_path, mode):
    path = _source_file(tmp_path)
    os.chmod(path, mode)
    source = read_source(str(path))
    with pytest.raises(SourceError, match="^not written: the file is read-only$"):
        write_source(source, "x = 2\n")
    assert path.read_text() == "x = 1\n" and stat.S_IMODE(os.stat(path).st_mode) == mode


def test_fix_reports_a_read_only_file_in_one_line_and_leaves_it(tmp_path):
    from torchnumlint.config import Config
    from torchnumlint.results import Options
    from torchnumlint.rules.registry import registry
    from torchnumlint.runner import run

    path = _source_file(tmp_path, text="import torch\ny = torch.log(torch.sigmoid(x))\n")
    os.chmod(path, 0o444)
    result = run([str(path)], Config(), [registry()["TNL104"]], Options(fix=True, cache=False))
    assert result.errors == [f"{path}: not written: the file is read-only"]
    assert path.read_text() == "import torch\ny = torch.log(torch.sigmoid(x))\n"


def test_a_hard_linked_file_is_written_through_every_link(tmp_path):
    path = _source_file(tmp_path)
    other = tmp_path / "other.py"
    os.link(path, other)
    write_source(read_source(str(path)), "x = 2\n")
    assert other.read_text() == "x = 2\n"
    assert os.stat(path).st_ino == os.stat(other).st_ino and os.stat(path).st_nlink == 2


def test_a_symlink_stays_a_link_and_its_target_keeps_mode(tmp_path):
    target = _source_file(tmp_path, "real.py")
    os.chmod(target, 0o640)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    write_source(read_source(str(link)), "x = 2\n")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "x = 2\n" and stat.S_IMODE(os.stat(target).st_mode) == 0o640


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file away needs root")
def test_the_owner_survives_a_rewrite(tmp_path):
    path = _source_file(tmp_path)
    os.chown(path, 12345, 23456)
    write_source(read_source(str(path)), "x = 2\n")
    info = os.stat(path)
    assert (info.st_uid, info.st_gid) == (12345, 23456) and path.read_text() == "x = 2\n"
