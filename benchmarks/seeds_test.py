from benchmarks.reference import render_section
from benchmarks.seeds import SECTION, added, heading, recorded_rows, render


def test_the_table_gives_each_seed_then_the_mean_and_spread_and_how_many_reach_the_bar():
    rows = [
        {"seed": s, "accuracy": a, "auc": 0.91, "training_tflop": 27.7, "utilization": 0.48, "wall_seconds": 243,
         "peak_gflops": 291, "wall_x_peak_tflop": 70.7}
        for s, a in ((42, 0.8354), (1, 0.8268), (2, 0.8183))
    ]  # fmt: skip
    text = render_section(render(rows, ["training.learning_rate=2e-4"], 700))
    assert text.startswith(SECTION + ", with `training.learning_rate=2e-4`\n")
    assert "`training.learning_rate=2e-4`" in text
    assert "| mean ± sd | 0.8268 ± 0.0086 | 0.9100 ± 0.0000 | 27.7 |" in text
    assert "1 of 3 seeds reach test accuracy 0.83." in text


def test_the_default_recipe_and_each_other_recipe_get_their_own_section():
    assert heading([]) == SECTION
    assert heading(["a=1"]) != heading(["a=2"]) != SECTION


def test_added_seeds_join_the_recipes_rows_and_the_mean_is_taken_over_all():
    def rows(*seeds_and_accuracies):
        return [
            {"seed": s, "accuracy": a, "auc": 0.91, "training_tflop": 19.2, "utilization": 0.37, "wall_seconds": 156,
             "peak_gflops": 426, "wall_x_peak_tflop": 66}
            for s, a in seeds_and_accuracies
        ]  # fmt: skip

    recipe = ["training.packing=true"]
    section = render(rows((42, 0.8245), (1, 0.8120)), recipe, 300)
    assert recorded_rows(section) == rows((42, 0.8245), (1, 0.8120))  # read back from the cells as shown
    merged = added(section, rows((11, 0.8284)), recipe, 200)
    assert [cells[0] for cells in merged["rows"]] == ["42", "1", "11", "mean ± sd"]
    assert merged["rows"][-1][1] == "0.8216 ± 0.0086"
    assert merged["text"][0] == section["text"][0] and merged["text"][1].startswith("Seeds 11 added: Measured on")
    assert merged["notes"] == ["0 of 3 seeds reach test accuracy 0.83."]
