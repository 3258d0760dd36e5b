"""Loop references for the objectives and the recipes' losses (pytorch-metric-learning's test manner).

Each function recomputes one loss with explicit Python loops on Python floats (double precision, from
``tensor.tolist()``), element by element, written from its source, not from our vectorised code:

- the papers' equations: ``supcon`` (Gunel et al. Eq. 3), ``capt`` (Luo et al. Eq. 2–4, with the queue
  of §2.2), ``reclaim_ans`` (RECLAIM's Eq. 6);
- the authors' released code: the gradient-dissipation losses ``alignment``, ``uniformity``,
  ``align_uniform``, ``dcl`` and ``margin`` (BDBC-KG-NLP/ICLR2023_Gradient-Dissipation, lines cited in
  their section below);
- the formulas as the objectives' docstrings state them: ``infonce`` (hard negatives and their weight,
  ``ids``, both directions), ``triplet`` and ``cross_entropy``.

Inputs are embeddings (rows), except ``cross_entropy`` (logits) and ``reclaim_ans`` (critic scores).
``tests/objectives`` compares the objectives with them, and ``tests/runs`` (``test_capt``, ``test_gd``,
``test_reclaim``, ``test_scl``) the recipes' loss parts.
"""

from __future__ import annotations

import math

from torch import Tensor


def rows(x: Tensor) -> list[list[float]]:
    return x.detach().double().tolist()


def dot(u: list[float], v: list[float]) -> float:
    return sum(a * b for a, b in zip(u, v, strict=True))


def norm(u: list[float]) -> float:
    return math.sqrt(dot(u, u))


def unit(u: list[float]) -> list[float]:
    n = max(norm(u), 1e-12)
    return [a / n for a in u]


def cos(u: list[float], v: list[float]) -> float:
    return dot(unit(u), unit(v))


def log_sum_exp(values: list[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def infonce(anchors, positives, negatives=None, tau=0.05, similarity="cos", symmetric=False, weight=0.0, ids=None):
    a, p = rows(anchors), rows(positives)
    n = rows(negatives) if negatives is not None else []
    sim = cos if similarity == "cos" else dot
    batch = len(a)
    candidates = p + n

    def one_direction(queries, keys, extra_weight):
        total = 0.0
        for i in range(batch):
            logits = []
            for j, key in enumerate(keys):
                if ids is not None and j < batch and j != i and ids[j] == ids[i]:
                    continue
                bonus = extra_weight if (j >= batch and (j - batch) % batch == i) else 0.0
                logits.append(sim(queries[i], key) / tau + bonus)
            positive = sim(queries[i], keys[i]) / tau
            total += -(positive - log_sum_exp(logits))
        return total / batch

    forward = one_direction(a, candidates, weight)
    if not symmetric:
        return forward
    return (forward + one_direction(p, a, 0.0)) / 2


def supcon(embeddings, labels, tau=0.1, reduction="mean"):
    """Gunel et al., ICLR 2021, Eq. 3 (Khosla et al. 2020, Eq. 2, L^sup_out), term by term:

        L_SCL = Σ_{i=1}^{N} −1/(N_{y_i} − 1) Σ_{j=1}^{N} 1[i≠j]·1[y_i=y_j]·log( exp(Φ_i·Φ_j/τ) / Σ_{k=1}^{N} 1[i≠k]·exp(Φ_i·Φ_k/τ) )

    Φ the l2-normalised embeddings, N_{y_i} the number of rows labelled y_i. A row alone in its class
    (N_{y_i} − 1 = 0, an empty inner sum) is left out. ``reduction="sum"`` is the equation as printed;
    ``"mean"`` divides that sum by the number of rows kept (Khosla et al.'s code, pytorch-metric-learning).
    """
    phi, y = [unit(r) for r in rows(embeddings)], labels.tolist()
    n = len(phi)
    total, kept = 0.0, 0
    for i in range(n):
        n_yi = sum(1 for label in y if label == y[i])
        if n_yi - 1 == 0:
            continue
        denominator = sum(math.exp(dot(phi[i], phi[k]) / tau) for k in range(n) if k != i)
        inner = sum(
            math.log(math.exp(dot(phi[i], phi[j]) / tau) / denominator) for j in range(n) if j != i and y[j] == y[i]
        )
        total += -inner / (n_yi - 1)
        kept += 1
    if reduction == "sum":
        return total
    return total / kept if kept else 0.0


def cross_entropy(logits, labels):
    lg, y = rows(logits), labels.tolist()
    return sum(-(row[c] - log_sum_exp(row)) for row, c in zip(lg, y, strict=True)) / len(lg)


def capt(originals, corrupted, queue=None, tau=0.1, reduction="mean"):
    """Luo et al. (CAPT), written from the paper: s = ℓ2-normalised representations (§2.1),
    Eq. 2  L(x_i) = −log exp(s_i·ŝ_i/τ) / (Σ_j exp(s_i·ŝ_j/τ) + Σ_{j≠i} exp(s_i·s_j/τ)),
    Eq. 3  L(x̂_i) = −log exp(ŝ_i·s_i/τ) / (Σ_j exp(ŝ_i·s_j/τ) + Σ_{j≠i} exp(ŝ_i·ŝ_j/τ)),
    each denominator plus Σ_k exp(·q_k/τ) over the memory queue's stored representations (§2.2), and
    Eq. 4  L_capt = Σ_i {L(x_i) + L(x̂_i)}  (``reduction="sum"``); ``"mean"`` divides Eq. 4 by n."""
    s, s_hat = [unit(r) for r in rows(originals)], [unit(r) for r in rows(corrupted)]
    q = [unit(r) for r in rows(queue)] if queue is not None else []
    n = len(s)

    def e(u, v):
        return math.exp(dot(u, v) / tau)

    def loss_x(i):  # Eq. 2
        z = sum(e(s[i], s_hat[j]) for j in range(n)) + sum(e(s[i], s[j]) for j in range(n) if j != i)
        z += sum(e(s[i], k) for k in q)
        return -math.log(e(s[i], s_hat[i]) / z)

    def loss_x_hat(i):  # Eq. 3
        z = sum(e(s_hat[i], s[j]) for j in range(n)) + sum(e(s_hat[i], s_hat[j]) for j in range(n) if j != i)
        z += sum(e(s_hat[i], k) for k in q)
        return -math.log(e(s_hat[i], s[i]) / z)

    total = sum(loss_x(i) + loss_x_hat(i) for i in range(n))  # Eq. 4
    return total if reduction == "sum" else total / n


# --- Nie, Zhang & Mao, ICLR 2023: written from the authors' released code, BDBC-KG-NLP/ICLR2023_Gradient-
# Dissipation @ 0a653dd, loss.py (lines as stored: decouple_contrastive_loss 34–42, decouple_contrastive_
# positive_loss 45–55, margin_loss 59–73, margin_p_loss 77–88, margin_e_loss 91–102, lalign 105–107, lunif
# 110–115) and simcse/models.py cal_loss (branch "a&u": (1 - loss_lambda) * lalign + loss_lambda * lunif;
# the inputs z1, z2 are F.normalize-d in cl_forward). Loops on Python floats, not our vectorised forms.


def alignment(x, y, alpha=2.0):
    """lalign: mean over pairs of ‖x_i − y_i‖^α (normalised rows)."""
    xs, ys = [unit(r) for r in rows(x)], [unit(r) for r in rows(y)]
    return sum(norm([a - b for a, b in zip(u, v, strict=True)]) ** alpha for u, v in zip(xs, ys, strict=True)) / len(xs)


def uniformity(x, t=2.0):
    """One side of lunif: log of the mean over the pdist pairs i < j of exp(−t ‖x_i − x_j‖²)."""
    xs = [unit(r) for r in rows(x)]
    potentials = []
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            squared = sum((a - b) ** 2 for a, b in zip(xs[i], xs[j], strict=True))
            potentials.append(math.exp(-t * squared))
    return math.log(sum(potentials) / len(potentials))


def align_uniform(x, y, lam=0.5, alpha=2.0, t=2.0, form="nie"):
    """``nie``: cal_loss "a&u", (1 − λ)·lalign + λ·lunif, lunif = 2t + (unif(x) + unif(y))/2 (loss.py 115).
    ``wang_isola``: SsnL/align_uniform's align_loss + lam * (uniform_loss(x) + uniform_loss(y)) / 2."""
    both_sides = (uniformity(x, t) + uniformity(y, t)) / 2
    if form == "wang_isola":
        return alignment(x, y, alpha) + lam * both_sides
    return (1 - lam) * alignment(x, y, alpha) + lam * (2 * t + both_sides)


def dcl(x, y, tau=0.05, hinged=False):
    """decouple_contrastive_loss / decouple_contrastive_positive_loss: c_ij = cos(x_i, y_j)/τ; per row i,
    −c_ii + log(Σ_j exp(c_ij · [i ≠ j]) − 1) (the zeroed diagonal gives exp 0 = 1, removed by the − 1);
    DCL+ keeps a row's term only where it is > 0; the mean is over all rows."""
    xs, ys = [unit(r) for r in rows(x)], [unit(r) for r in rows(y)]
    total = 0.0
    for i in range(len(xs)):
        c = [dot(xs[i], ys[j]) / tau for j in range(len(ys))]
        term = -c[i] + math.log(sum(math.exp(c[j] if j != i else 0.0) for j in range(len(ys))) - 1)
        total += (term if term > 0 else 0.0) if hinged else term
    return total / len(xs)


def margin(x, y, kind, m, diagonal="fill"):
    """MET (margin_e_loss), MAT (margin_loss), MPT (margin_p_loss). Matrix entries pair row x_i with column y_k;
    the hardest negative of y_k is the min (MET, MAT) or max (MPT) over the rows i of column k (dim=0). With
    ``diagonal="fill"`` the i = k entry is what the code's ``mul(mask)`` leaves: cosine 0, so angle
    arccos(0) = π/2 (MAT) and product 0 (MPT), and distance 0 + 2 (MET: ``+ 2 * diag``); with "exclude" it
    is skipped. MAT's margin is m·π; its positive angle is arccos((2 − ‖x_k − y_k‖²)/2). Mean over all k of
    the hinge, clipped terms counting as 0."""
    xs, ys = [unit(r) for r in rows(x)], [unit(r) for r in rows(y)]
    batch = len(xs)
    total = 0.0
    for k in range(batch):
        gap = norm([a - b for a, b in zip(xs[k], ys[k], strict=True)])
        if kind == "euclidean":
            column = [math.sqrt(max(2 - 2 * dot(xs[i], ys[k]), 0.0)) for i in range(batch)]
            filled = 2.0
            term = m + gap - hardest_negative(column, k, min, filled, diagonal)
        elif kind == "angle":
            column = [math.acos(max(-1.0, min(1.0, dot(xs[i], ys[k])))) for i in range(batch)]
            filled = math.acos(0.0)
            positive = math.acos(max(-1.0, min(1.0, (2 - gap**2) / 2)))
            term = m * math.pi + positive - hardest_negative(column, k, min, filled, diagonal)
        else:
            column = [dot(xs[i], ys[k]) for i in range(batch)]
            filled = 0.0
            term = m - dot(xs[k], ys[k]) + hardest_negative(column, k, max, filled, diagonal)
        total += term if term > 0 else 0.0
    return total / batch


def hardest_negative(column, k, pick, filled, diagonal):
    """min / max of one column, its k-th entry replaced by ``filled`` or skipped."""
    if diagonal == "fill":
        return pick(filled if i == k else value for i, value in enumerate(column))
    return pick(value for i, value in enumerate(column) if i != k)


def triplet(anchors, positives, negatives, m=0.5, distance="euclidean"):
    a, p, n = rows(anchors), rows(positives), rows(negatives)

    def d(u, v):
        if distance == "euclidean":
            return norm([x - y for x, y in zip(u, v, strict=True)])
        return 1 - cos(u, v)

    return sum(max(d(a[i], p[i]) - d(a[i], n[i]) + m, 0.0) for i in range(len(a))) / len(a)


def log_g(s: float) -> float:
    """log g for g = 1 / (1 + e^(−s)), the critic's probability of a true pair, stable for large |s|."""
    return -math.log1p(math.exp(-s)) if s >= 0 else s - math.log1p(math.exp(s))


def reclaim_ans(positive, against_v, against_u, reduction="half_sum"):
    """RECLAIM's −L_ANS from critic scores s (paper Eq. 6, its "−" before the sums read as "+", as in Eq. 3):

    −(1/B) Σ_i [ log g(u_i, v_i) + ½ Σ_{v'∈V_nn} log(1 − g(u_i, v')) + ½ Σ_{u'∈U_nn} log(1 − g(u', v_i)) ],
    with log(1 − g(s)) = log g(−s). ``positive`` (B,) holds s(u_i, v_i), ``against_v`` (B, K) s(u_i, v'_ik),
    ``against_u`` (B, K) s(u'_ik, v_i). ``reduction="mean"``: (1/K) Σ in place of ½ Σ (not the paper's form).
    """
    pos, sv, su = positive.detach().double().tolist(), rows(against_v), rows(against_u)
    total = 0.0
    for i in range(len(pos)):
        weight_v = 0.5 if reduction == "half_sum" else 1.0 / len(sv[i])
        weight_u = 0.5 if reduction == "half_sum" else 1.0 / len(su[i])
        total += log_g(pos[i])
        total += weight_v * sum(log_g(-s) for s in sv[i])
        total += weight_u * sum(log_g(-s) for s in su[i])
    return -total / len(pos)
