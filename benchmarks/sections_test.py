from benchmarks.sections import with_preamble, with_section

DOCUMENT = "# Benchmarks\n\nold table\n\n## Scale\n\nscale rows\n\n## Seeds\n\nseed rows\n"


def test_a_section_is_replaced_in_place_and_the_rest_kept():
    text = with_section(DOCUMENT, "## Scale\n\nnew scale rows\n")
    assert text == "# Benchmarks\n\nold table\n\n## Scale\n\nnew scale rows\n\n## Seeds\n\nseed rows\n"


def test_a_new_section_is_appended():
    text = with_section("# Benchmarks\n\ntable\n", "## Seeds\n\nrows\n")
    assert text == "# Benchmarks\n\ntable\n\n## Seeds\n\nrows\n"


def test_the_preamble_is_replaced_and_every_section_kept():
    text = with_preamble(DOCUMENT, "# Benchmarks\n\nnew table\n")
    assert text == "# Benchmarks\n\nnew table\n\n## Scale\n\nscale rows\n\n## Seeds\n\nseed rows\n"
