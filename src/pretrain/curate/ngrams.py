"""Gopher's repeated-n-gram rules (Rae et al. 2021, Table A1), exact and vectorized.

`ngram_verdict` decides `top_{n}_gram` (the most frequent n-gram's characters, " ".join, times its
count, over len(text)) and `duplicated_{n}_n_grams` (characters of repeated n-grams, "".join,
counted by datatrove's left-to-right scan that jumps n words after a hit, over len(text)), from
integer word ids. Exact: n-gram identity is decided on word ids, never on a hash alone; hashes and
bounds only skip work whose outcome is already certain.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np


def ngram_verdict(
    ids: np.ndarray,
    counts: np.ndarray,
    lens: np.ndarray,
    n_chars: int,
    top: dict[int, float],
    dup: dict[int, float],
) -> bool | str:
    """Gopher's n-gram rules on one document: True, or `top_{n}_gram` / `duplicated_{n}_n_grams`.

    `ids`: one id per word (equal words, equal ids; ids < number of words), `counts`: occurrences
    per id, `lens`: characters per word, `n_chars`: len(text); `top` / `dup`: n -> threshold.
    """
    n_words = len(ids)
    cum_np = np.concatenate(([0], np.cumsum(lens)))
    occurrences = counts[ids]  # of each position's word
    cum = cum_np.tolist()
    start = min((n for n in dup if n <= n_words), default=0)
    fewest = _window_minima(occurrences, max([*top, start, 1]))
    if _tops_bounded(fewest, cum_np, n_chars, top):
        # No top n-gram can reach its threshold: only the repeated n-grams are left to find,
        # starting at the shortest length the rules ask for.
        if not start:
            return True
        act, gid, first = _exact_groups(ids, fewest[start], start)
        if start in dup and len(act) and _repeated_chars(act, gid, first, cum, start) / n_chars > dup[start]:
            return f"duplicated_{start}_n_grams"
        if not len(act) or _out_of_reach(act, first, cum, start, dup, n_chars, cum_np):
            return True
        return _walk(ids, act, gid, start + 1, {}, dup, cum, n_chars, cum_np)
    # An n-gram can repeat only where its first n-1 words repeat, so each level groups just the
    # positions still "active" (their (n-1)-gram occurs twice or more).
    act = np.flatnonzero(occurrences >= 2)
    return _walk(ids, act, ids[act], 2, top, dup, cum, n_chars, cum_np)


def _window_minima(occurrences: np.ndarray, up_to: int) -> dict[int, np.ndarray]:
    """For n = 1..up_to: the fewest occurrences of a word in each n-word window (n-gram position)."""
    out = {1: occurrences}
    for n in range(2, min(up_to, len(occurrences)) + 1):
        out[n] = np.minimum(out[n - 1][:-1], occurrences[n - 1 :])
    return out


def _tops_bounded(
    fewest: dict[int, np.ndarray], cum: np.ndarray, n_chars: int, top: dict[int, float]
) -> bool:
    """True when no top n-gram can pass its threshold. An n-gram occurs at most as often as the
    rarest of its words, so len(g) * count(g) <= max over positions of (n-gram length) x (fewest
    occurrences of a word in it): a cheap bound that clean text stays far below."""
    for n, thr in top.items():
        if n not in fewest:
            continue  # fewer words than n: no n-gram
        lengths = cum[n:] - cum[:-n] + (n - 1)
        if int((lengths * fewest[n]).max()) / n_chars > thr:
            return False
    return True


def _exact_groups(ids: np.ndarray, fewest: np.ndarray, n: int) -> tuple[list[int], list[int], list[int]]:
    """Positions whose n-gram occurs twice or more, with an n-gram id and the first position of it.

    Only windows whose every word repeats (`fewest` >= 2) can repeat; a 64-bit hash of those
    windows finds the candidates, and grouping by the exact id tuples makes the result exact
    whatever the hash does.
    """
    act = np.flatnonzero(fewest >= 2)
    if act.size < 2:
        return [], [], []
    # The hash is the polynomial sum_k id_k * M^(n-1-k) mod 2^64. Up to _WIN_CELLS ids, the
    # windows as rows: one product and one row sum (Horner's rule takes 3n array operations);
    # beyond, Horner's rule, the same value, in memory of one window start each.
    if n <= _MAX_N and act.size * n <= _WIN_CELLS:
        win = ids[act[:, None] + _OFFSETS[:n]].astype(np.uint64)
        h = (win * _POWERS[n]).sum(axis=1, dtype=np.uint64)
    else:
        win, h = None, np.zeros(act.size, dtype=np.uint64)
        for k in range(n):
            h = h * np.uint64(_M) + ids[act + k].astype(np.uint64)
    order = np.argsort(h, kind="stable")
    sh = h[order]
    same = sh[1:] == sh[:-1]
    if not same.any():
        return [], [], []
    mark = np.zeros(act.size, dtype=bool)
    mark[1:] |= same
    mark[:-1] |= same
    # Runs of equal hashes (each of two or more windows, in position order: the sort is stable).
    rows = order[mark]
    cand = act[rows]
    hc = sh[mark]
    head = np.empty(cand.size, dtype=bool)
    head[0] = True
    np.not_equal(hc[1:], hc[:-1], out=head[1:])
    gid = np.cumsum(head) - 1
    head_row = rows[head][gid]
    first = act[head_row]
    # Exact: a run is a group when each of its windows holds the same ids as the run's first;
    # a hash collision (never seen) sends the candidates through the grouping by id tuples.
    if win is not None:
        exact = np.array_equal(win[rows], win[head_row])
    else:
        exact = all(np.array_equal(ids[cand + k], ids[first + k]) for k in range(n))
    if not exact:
        return _groups_by_tuple(ids, np.sort(cand), n)
    by_pos = np.argsort(cand, kind="stable")
    return cand[by_pos].tolist(), gid[by_pos].tolist(), first[by_pos].tolist()


def _groups_by_tuple(ids: np.ndarray, cand: np.ndarray, n: int) -> tuple[list[int], list[int], list[int]]:
    """`_exact_groups`'s result from candidate positions (sorted), grouped by their id tuples."""
    id_list = ids.tolist()
    groups: dict[tuple[int, ...], list[int]] = {}
    for p in cand.tolist():
        groups.setdefault(tuple(id_list[p : p + n]), []).append(p)
    pos, gid, first = [], [], []
    for g, members in enumerate(groups.values()):
        if len(members) >= 2:
            for p in members:
                pos.append(p)
                gid.append(g)
                first.append(members[0])
    order_ = sorted(range(len(pos)), key=pos.__getitem__)
    return [pos[i] for i in order_], [gid[i] for i in order_], [first[i] for i in order_]


_M = 0x9E3779B97F4A7C15
_MAX_N = 100  # RulesConfig bounds n to 1..100
_OFFSETS = np.arange(_MAX_N + 1)
_WIN_CELLS = 1 << 20  # 8 MiB of uint64 window ids
_POWERS = {n: np.array([pow(_M, n - 1 - k, 1 << 64) for k in range(n)], dtype=np.uint64)
           for n in range(1, _MAX_N + 1)}


def _walk(ids, act, gid, start: int, top: dict, dup: dict, cum: list[int], n_chars: int,
          cum_np: np.ndarray) -> bool | str:
    """Levels `start`.. of the n-gram rules from the active positions of level start - 1: numpy
    while there are many, a dict once few are left (numpy's per-call cost dominates small arrays)."""
    max_n = max([*top, *dup, 1])
    if isinstance(act, list) and len(act) >= _SMALL:
        act, gid = np.array(act, dtype=np.int64), np.array(gid, dtype=np.int64)
    id_list = ids.tolist() if isinstance(act, list) else None
    for n in range(start, min(max_n, len(ids)) + 1):
        if id_list is None and len(act) < _SMALL:
            id_list, act, gid = ids.tolist(), act.tolist(), gid.tolist()
        if id_list is None:
            act, gid, first, cmax, at = _level_np(act, gid, ids, n)
        else:
            act, gid, first, cmax, at = _level_py(act, gid, id_list, n)
        # Counter.most_common(1): the earliest-seen of the most frequent n-grams; when all are
        # unique, that is the first n-gram.
        if n in top and (cum[at + n] - cum[at] + n - 1) * cmax / n_chars > top[n]:
            return f"top_{n}_gram"
        if not len(act):
            if all(m <= n for m in top):
                break  # nothing repeats at this length, so nothing longer repeats either
            continue
        if n in dup and _repeated_chars(act, gid, first, cum, n) / n_chars > dup[n]:
            return f"duplicated_{n}_n_grams"
        if all(m <= n for m in top) and _out_of_reach(act, first, cum, n, dup, n_chars, cum_np):
            break
    return True


def _out_of_reach(pos, first, cum: list[int], n: int, dup: dict[int, float], n_chars: int,
                  cum_np: np.ndarray) -> bool:
    """True when no longer duplicated n-gram rule can fire. A hit at a longer length m starts where
    the current n-gram repeats (not at its first occurrence), and hits never overlap, so their
    characters fit in the union of the windows [p, p + max m) over those starts."""
    later = [m for m in dup if m > n]
    if not later:
        return True
    width, last = max(later), len(cum) - 1
    if len(pos) > _SMALL // 2:
        covered = _covered(np.asarray(pos), np.asarray(first), cum_np, width, last)
        return covered / n_chars <= min(dup[m] for m in later)
    covered, end = 0, -1
    for p, f in zip(pos, first):
        if p == f:
            continue
        a, b = max(p, end), min(p + width, last)
        if b > a:
            covered += cum[b] - cum[a]
            end = b
    return covered / n_chars <= min(dup[m] for m in later)


def _covered(pos: np.ndarray, first: np.ndarray, cum: np.ndarray, width: int, last: int) -> int:
    """`_out_of_reach`'s loop over many positions, in numpy: the windows [p, min(p + width, last))
    of the later occurrences, in position order, all of one width, so each window's end is at
    least the one before it and the union is each window cut to start where the previous ended."""
    starts = pos[pos != first]
    if not starts.size:
        return 0
    ends = np.minimum(starts + width, last)
    prev = np.empty_like(ends)
    prev[0] = -1
    prev[1:] = ends[:-1]
    a = np.maximum(starts, prev)
    keep = ends > a
    return int((cum[ends[keep]] - cum[a[keep]]).sum())


_SMALL = 128


def _level_np(act: np.ndarray, gid: np.ndarray, ids: np.ndarray, n: int) -> tuple:
    """One n-gram level over active positions: (repeated positions, their n-gram group, the first
    position of that group, the top count, the first position of the top n-gram)."""
    act = act[act <= len(ids) - n]
    if not act.size:
        return act, act, act, 1, 0
    group, first_of, counts, firsts = _rank(gid[: len(act)] * len(ids) + ids[act + n - 1])
    rep = counts[group] >= 2
    if not rep.any():
        return act[:0], act[:0], act[:0], 1, 0
    cmax = int(counts.max())
    at = int(act[firsts[counts == cmax]].min())
    return act[rep], group[rep], act[first_of[rep]], cmax, at


def _level_py(act: list[int], gid: list[int], ids: list[int], n: int) -> tuple:
    """`_level_np` with a dict, for few active positions."""
    last = len(ids) - n
    groups: dict[
        tuple[int, int], list[int]
    ] = {}  # (group of the (n-1)-gram, next word) -> [count, first, id]
    entries = []
    for p, g in zip(act, gid):
        if p > last:
            break
        e = groups.get((g, ids[p + n - 1]))
        if e is None:
            e = groups[(g, ids[p + n - 1])] = [0, p, len(groups)]
        e[0] += 1
        entries.append(e)
    cmax, at = 1, 0
    for count, first, _ in groups.values():
        if count > cmax or (count == cmax > 1 and first < at):
            cmax, at = count, first
    pos, grp, fst = [], [], []
    for p, e in zip(act, entries):
        if e[0] >= 2:
            pos.append(p)
            grp.append(e[2])
            fst.append(e[1])
    return pos, grp, fst, cmax, at


def _rank(key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Group equal keys: (group id per position, first position of each position's group,
    count per group, first position per group). A lean np.unique for short arrays."""
    order = np.argsort(key, kind="stable")
    sk = key[order]
    starts = np.empty(len(sk), dtype=bool)
    starts[0] = True
    np.not_equal(sk[1:], sk[:-1], out=starts[1:])
    group = np.cumsum(starts) - 1
    inverse = np.empty_like(group)
    inverse[order] = group
    heads = np.flatnonzero(starts)
    firsts = order[heads]  # stable sort: the first of each group is its earliest position
    counts = np.diff(np.append(heads, len(sk)))
    return inverse, firsts[inverse], counts, firsts


def _repeated_chars(pos, group, first, cum: list[int], n: int) -> int:
    """datatrove's find_all_duplicate: scan n-grams left to right; an n-gram already seen adds its
    characters ("".join, no separator) and jumps n words ahead, so overlapping repeats count once.

    Only positions whose n-gram occurs more than once (`pos`, with their n-gram `group` and the
    position of its `first` occurrence) can be hits, so the scan visits those alone: a later
    occurrence is a hit when an earlier one was visited, i.e. not jumped over.
    """
    if not isinstance(pos, list):
        pos, group, first = pos.tolist(), group.tolist(), first.tolist()
    jump_from: list[int] = []  # jumped-over positions are [h + 1, h + n) for each hit h
    in_set: set[int] = set()
    repeated, next_free = 0, 0
    for p, x, f in zip(pos, group, first):
        if p == f or p < next_free:
            continue  # a first occurrence (never a hit) or a jumped-over position
        if x in in_set:
            hit = True
        else:
            k = bisect_right(jump_from, f) - 1
            hit = not (k >= 0 and jump_from[k] < f < jump_from[k] + n)
        if hit:
            repeated += cum[p + n] - cum[p]
            jump_from.append(p)
            next_free = p + n
        else:
            in_set.add(x)  # its first occurrence was jumped over: this one enters the set
    return repeated
