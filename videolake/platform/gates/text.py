"""Caption text measures used by the clip_captions gates.

``repetition_score`` catches degenerate generations (a token or a short phrase looping) that a length bound misses.
"""

from __future__ import annotations

import re
from collections import Counter

_TOKEN = re.compile(r"\w+|[^\w\s]+")
MAX_NGRAM = 3  # longest repeated phrase measured, in tokens


def tokens(text: str) -> list[str]:
    """Lower-cased words and punctuation runs: "A dog, a DOG!" -> [a, dog, ",", a, dog, "!"]."""
    return [t.lower() for t in _TOKEN.findall(text)]


def repetition_score(text: str | None, max_n: int = MAX_NGRAM) -> float:
    """Share (0..1) of the caption's tokens covered by its most repeated n-gram, n = 1..max_n.

    Only n-grams that occur at least twice count, so a caption without any repeated token scores 0.0. Covered
    positions are counted once even where occurrences overlap ("a a a a": the bigram "a a" covers 4 of 4 tokens).
    Examples: "dog dog dog dog" -> 1.0; "a cat a cat a cat" -> 1.0; "A man walks a dog." -> 2/6 ("a" twice);
    "" or None -> 0.0. Natural captions score ~0.1-0.3; looping generations approach 1.0.
    """
    toks = tokens(text or "")
    total = len(toks)
    if total == 0:
        return 0.0
    best = 0
    for n in range(1, max_n + 1):
        if total < 2 * n:
            break
        grams = [tuple(toks[i : i + n]) for i in range(total - n + 1)]
        for gram, count in Counter(grams).items():
            if count < 2 or count * n <= best:
                continue  # cannot beat the best coverage found so far
            covered: set[int] = set()
            for i, g in enumerate(grams):
                if g == gram:
                    covered.update(range(i, i + n))
            best = max(best, len(covered))
    return best / total
