"""A small distillation run with the numerical hazards that torchnumlint finds and fixes.

    python examples/unsafe_training.py      # trains a few steps (CPU is fine: autocast turns itself off)
    torchnumlint examples/                  # the findings
    torchnumlint --fix --unsafe-fixes examples/

Every function below is written the way it is often written in real training code.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class SquashGrad(torch.autograd.Function):
    """A custom op with a hand-written backward: autocast hands it fp16 inputs unless told not to."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.rsqrt(1 + x * x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (1 + x * x) ** -1.5


class Student(nn.Module):
    def __init__(self, dim=64, classes=10, embed=16):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, dim), nn.GELU())
        self.head = nn.Linear(dim, classes)
        self.embed = nn.Linear(dim, embed)
        self.gate = nn.Linear(dim, 1)

    def forward(self, x):
        h = self.body(x)
        return self.head(h), self.embed(h), self.gate(h)


def distill_loss(student_logits, peer_logits):
    # mutual learning: both sides carry gradients
    return F.kl_div(F.log_softmax(student_logits, dim=-1), F.softmax(peer_logits, dim=-1), reduction="batchmean")


def prior_loss(logits, prior):
    return F.kl_div(F.softmax(logits, dim=-1), prior, reduction="batchmean")


def classification_loss(logits, labels):
    return F.nll_loss(torch.log(F.softmax(logits, dim=1)), labels)


def gate_log_prob(gate_logits):
    return torch.log(torch.sigmoid(gate_logits)).mean()


def gate_bce(gate_logits, gate_targets):
    return F.binary_cross_entropy(torch.sigmoid(gate_logits), gate_targets)


def soft_label_loss(logits, labels):
    return F.cross_entropy(F.softmax(logits, dim=-1), labels)


def peer_kl(logits, peer_logits, temperature=2.0):
    criterion = nn.KLDivLoss()
    teacher = F.softmax(peer_logits.detach() / temperature, dim=-1)
    return criterion(F.log_softmax(logits / temperature, dim=-1), teacher) * temperature**2


def contrastive_probs(z, peer_z, temperature=0.5):
    sim = torch.exp(z @ peer_z.T / temperature)
    return sim / sim.sum(dim=-1, keepdim=True)


def energy(logits):
    return -torch.log(torch.exp(logits).sum(dim=-1))


def smooth_gate(gate_logits):
    return 1 / (1 + torch.exp(-gate_logits))


def logistic_noise(shape, device):
    u = torch.rand(shape, device=device)
    return torch.log(u / (1 - u))


def label_entropy(labels, classes=10):
    counts = torch.bincount(labels, minlength=classes).float()
    p = counts / counts.sum()
    return -(p * torch.log(p)).sum()


def log_gate_loss(gate):
    log_gate = torch.where(gate > 0, torch.log(gate), torch.zeros_like(gate))
    return log_gate.mean()


def repulsion_loss(points):
    dist = torch.sqrt(((points[:, None] - points[None]) ** 2).sum(-1))
    return torch.exp(-dist).mean()


def heading(vel):
    return torch.atan(vel[..., 1] / vel[..., 0])


def growth_terms(rates):
    return torch.log(1 + rates), (torch.exp(rates) - 1) / rates, torch.log(1 + torch.exp(rates))


def attend(q, k, v, padding_mask):
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    scores = scores.masked_fill(padding_mask[:, None, :], float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def hard_negative_weights(z, peer_z):
    sim = z @ peer_z.transpose(0, 1)
    sim = sim / (sim.abs().amax(dim=-1, keepdim=True) + 1e-8)
    sim = sim.masked_fill(torch.eye(sim.shape[0], dtype=torch.bool, device=sim.device), -1e9)
    return sim.softmax(dim=-1)


def masked_label_smoothing(logits, labels, banned):
    logits = logits.masked_fill(banned, float("-inf"))
    return F.cross_entropy(logits, labels, label_smoothing=0.1)


class EmbeddingAgreement(nn.Module):
    """Pulls the student's embeddings towards the peer's; an all-zero embedding row (a dead
    projection, a padded position) is enough to poison the batch."""

    def forward(self, z, peer_z):
        cosine = (z * peer_z).sum(dim=-1) / (z.norm(dim=-1) * peer_z.norm(dim=-1))
        angle = torch.acos(cosine)
        unit = z / z.norm(dim=-1, keepdim=True)
        centred = unit - unit.mean(dim=-1, keepdim=True)
        distance = torch.sqrt((centred ** 2).sum(dim=-1))
        spread = torch.sqrt(z.var(dim=0)).mean()
        return (1 - cosine).mean() + 0.01 * angle.mean() + 0.01 * distance.mean() - 0.01 * spread


def embedding_log_volume(z):
    cov = z.T @ z / z.shape[0] + torch.eye(z.shape[1], device=z.device)
    return torch.log(torch.det(cov))


def scaled_clip_step(scaler, loss, opt, params, max_norm=1.0):
    """The loss-scaled step the project's GPU scripts call with their GradScaler."""
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(params, max_norm)
    scaler.step(opt)
    scaler.update()


def train(steps=3, device=None):
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    student, peer = Student().to(device), Student().to(device)
    agreement = EmbeddingAgreement()
    params = list(student.parameters()) + list(peer.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    for step in range(steps):
        x = torch.randn(32, 64, device=device)
        y = torch.randint(0, 10, (32,), device=device)
        prior = torch.full((32, 10), 0.1, device=device)
        gate_targets = torch.rand(32, 1, device=device)
        padding = torch.zeros(1, 32, dtype=torch.bool, device=device)  # no padding in this toy batch
        banned = torch.zeros(32, 10, dtype=torch.bool, device=device)
        with torch.cuda.amp.autocast():
            logits, z, gate = student(x)
            peer_logits, peer_z, _ = peer(x)
            z = SquashGrad.apply(z)
            loss = (
                classification_loss(logits, y)
                + distill_loss(logits, peer_logits)
                + 0.1 * prior_loss(logits, prior)
                - 0.1 * gate_log_prob(gate)
                + agreement(z, peer_z)
                + 0.1 * gate_bce(gate, gate_targets)
                + 0.1 * soft_label_loss(logits, y)
                + 0.1 * peer_kl(logits, peer_logits)
                - 0.01 * contrastive_probs(z, peer_z).diagonal().mean()
                + 0.01 * energy(logits).mean()
                + 0.01 * smooth_gate(gate).mean()
                + 0.01 * (gate + logistic_noise(gate.shape, device)).mean()
                + 0.01 * sum(t.mean() for t in growth_terms(gate.abs() + 0.1))
                - 0.001 * embedding_log_volume(z.float())
                + 0.01 * log_gate_loss(gate)
                + 0.01 * attend(z[None], peer_z[None], peer_z[None], padding).mean()
                + 0.1 * masked_label_smoothing(logits, y, banned)
                + 0.01 * hard_negative_weights(z, peer_z).max(dim=-1).values.mean()
            )
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step}: loss {loss.item():.4f}")
        print(f"label entropy {label_entropy(y).item():.4f}")
        print(f"spread {repulsion_loss(z.detach()).item():.4f}, heading {heading(z.detach()[:, :2]).mean().item():.4f}")
    return loss.item()


if __name__ == "__main__":
    train()
