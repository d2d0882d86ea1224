"""A loss helper in a file of its own, as training code keeps it: the KL of a consistency loss
whose target is named like a teacher's but is computed by the model being trained (with its
prompt), so it carries a gradient. Used by test_watch_replay.py: the KL line is the operation
nan_watch's replay must name."""

import torch.nn.functional as F


def consistency_kl(student_logits, teacher_logits):
    return F.kl_div(F.log_softmax(student_logits, -1), F.softmax(teacher_logits, -1), reduction="batchmean")
