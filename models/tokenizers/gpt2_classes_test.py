"""The GPT-2 class table is the installed `tokenizers`' own, and the boundaries built from it classify alike."""

from models.tokenizers import gpt2_classes


def test_table_matches_the_installed_tokenizers():
    assert gpt2_classes.derive() == gpt2_classes.RANGES, (
        "regenerate with: bin/in-env python -m models.tokenizers.gpt2_classes"
    )


def test_boundaries_give_each_code_point_its_class():
    import bisect

    starts, classes = gpt2_classes.boundaries()
    assert starts == sorted(starts) and starts[0] == 0
    expected = {0x41: gpt2_classes.LETTER, 0x31: gpt2_classes.NUMBER, 0x20: gpt2_classes.SPACE, 0x21: 0}
    expected |= {0x3000: gpt2_classes.SPACE, 0x4E00: gpt2_classes.LETTER, 0x1F600: gpt2_classes.OTHER}
    for point, kind in expected.items():
        assert classes[bisect.bisect_right(starts, point) - 1] == kind, hex(point)
