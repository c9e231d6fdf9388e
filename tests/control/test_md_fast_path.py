"""md() skips its escapes for text none of them would change: over strings built from every piece markdown reads as
syntax (at the start, inside, at the end), what it returns is what applying every escape returns."""
import random

from gpudiag.render.safe_text import clean, md, md_escaped

PIECES = ["\\", "`", "<", "|", "]", "(", "[", "!", "://", "www.", "#", ">", "=", "~", "-", "+", "*", "1", "12", ".",
          ")", " ", "\t", "a", "µs", "–", "w", ":", "/", "\n", "\x1b[31m", "\u202e"]


def test_md_is_every_escape_applied_whether_or_not_it_skips_them():
    rng = random.Random(20261205)
    texts = ["", "31.2 µs (30.1–32.7)", "GPU 4 (NVIDIA H200)", "1. x", "- x", "x](y)", "![x]", "http://x", "a|b"]
    texts += ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 8))) for _ in range(20000)]
    skipped = 0
    for text in texts:
        for keep_code in (False, True):
            expected = md_escaped(clean(text), keep_code)
            assert md(text, keep_code=keep_code) == expected, (text, keep_code)
            skipped += expected == clean(text)
    assert skipped > 2000  # the skip is exercised, not only the full pass
