"""Reference implementations with explicit Python loops over rows (pytorch-metric-learning's test manner).

Everything is computed on Python floats (double precision) from ``tensor.tolist()``, element by element,
so the vectorised objectives are checked against the formulas as written in their docstrings.
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


def supcon(embeddings, labels, tau=0.1):
    z, y = [unit(r) for r in rows(embeddings)], labels.tolist()
    losses = []
    for i in range(len(z)):
        positives = [p for p in range(len(z)) if p != i and y[p] == y[i]]
        if not positives:
            continue
        log_denominator = log_sum_exp([dot(z[i], z[a]) / tau for a in range(len(z)) if a != i])
        losses.append(-sum(dot(z[i], z[p]) / tau - log_denominator for p in positives) / len(positives))
    return sum(losses) / len(losses) if losses else 0.0


def cross_entropy(logits, labels):
    lg, y = rows(logits), labels.tolist()
    return sum(-(row[c] - log_sum_exp(row)) for row, c in zip(lg, y, strict=True)) / len(lg)


def capt(originals, corrupted, queue=None, tau=0.1):
    s, t = [unit(r) for r in rows(originals)], [unit(r) for r in rows(corrupted)]
    q = [unit(r) for r in rows(queue)] if queue is not None else []
    batch = len(s)
    total = 0.0
    for views, others in ((s, t), (t, s)):
        for i in range(batch):
            logits = [dot(views[i], others[j]) / tau for j in range(batch)]
            logits += [dot(views[i], views[j]) / tau for j in range(batch) if j != i]
            logits += [dot(views[i], k) / tau for k in q]
            total += -(dot(views[i], others[i]) / tau - log_sum_exp(logits))
    return total / batch


def alignment(x, y, alpha=2.0):
    xs, ys = [unit(r) for r in rows(x)], [unit(r) for r in rows(y)]
    return sum(norm([a - b for a, b in zip(u, v, strict=True)]) ** alpha for u, v in zip(xs, ys, strict=True)) / len(xs)


def uniformity(x, t=2.0):
    xs = [unit(r) for r in rows(x)]
    potentials = []
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            squared = sum((a - b) ** 2 for a, b in zip(xs[i], xs[j], strict=True))
            potentials.append(math.exp(-t * squared))
    return math.log(sum(potentials) / len(potentials))


def align_uniform(x, y, lam=0.5, alpha=2.0, t=2.0):
    return alignment(x, y, alpha) + lam * (uniformity(x, t) + uniformity(y, t)) / 2


def dcl(x, y, tau=0.05, hinged=False):
    xs, ys = [unit(r) for r in rows(x)], [unit(r) for r in rows(y)]
    total = 0.0
    for i in range(len(xs)):
        term = -dot(xs[i], ys[i]) / tau + log_sum_exp([dot(xs[i], ys[j]) / tau for j in range(len(xs)) if j != i])
        total += max(term, 0.0) if hinged else term
    return total / len(xs)


def margin(x, y, kind, m):
    xs, ys = [unit(r) for r in rows(x)], [unit(r) for r in rows(y)]
    batch = len(xs)
    total = 0.0
    for k in range(batch):
        others = [i for i in range(batch) if i != k]
        if kind == "euclidean":
            dist = [norm([a - b for a, b in zip(xs[i], ys[k], strict=True)]) for i in range(batch)]
            term = m + dist[k] - min(dist[i] for i in others)
        elif kind == "angle":
            angle = [math.acos(max(-1.0, min(1.0, dot(xs[i], ys[k])))) for i in range(batch)]
            term = m * math.pi + angle[k] - min(angle[i] for i in others)
        else:
            s = [dot(xs[i], ys[k]) for i in range(batch)]
            term = m - s[k] + max(s[i] for i in others)
        total += max(term, 0.0)
    return total / batch


def triplet(anchors, positives, negatives, m=0.5, distance="euclidean"):
    a, p, n = rows(anchors), rows(positives), rows(negatives)

    def d(u, v):
        if distance == "euclidean":
            return norm([x - y for x, y in zip(u, v, strict=True)])
        return 1 - cos(u, v)

    return sum(max(d(a[i], p[i]) - d(a[i], n[i]) + m, 0.0) for i in range(len(a))) / len(a)
