from benchmarks.peers import render


def _result(precision: str) -> dict:
    return {
        "precision": precision,
        "peak": 100.0,
        "ours": {"train_examples_per_second": 44.0, "utilization": 0.84, "accuracy": 0.8237, "auc": 0.9082,
                 "score_rows_per_second": 516.0},
        "theirs": {"train_examples_per_second": 22.0, "accuracy": 0.8252, "auc": 0.9101,
                   "score_rows_per_second": 172.0},
        "recipe": {"epochs": 1, "batch_size": 32, "learning_rate": 1e-4, "warmup_ratio": 0.1, "max_length": 64},
    }  # fmt: skip


def test_the_section_puts_each_side_and_their_ratio_in_a_row_and_says_when_bf16_was_not_measured():
    section = render([_result("fp32")], native_bf16=False, seconds=1500)
    rows = {(r[0], r[1]): r[2:] for r in section["rows"]}
    assert rows[("fp32", "training examples/s")] == ["44.0", "22.0", "2.00x"]
    assert rows[("fp32", "scoring rows/s")] == ["516", "172", "3.00x"]
    assert rows[("fp32", "test accuracy")] == ["0.8237", "0.8252", "-"]
    assert rows[("fp32", "our step's share of the peak")][0] == "84% of 100 GFLOP/s"
    assert "bf16 not measured: this CPU has neither AVX512-BF16 nor AMX" in " ".join(section["text"])
    both = render([_result("fp32"), _result("bf16")], native_bf16=True, seconds=3000)
    assert {r[0] for r in both["rows"]} == {"fp32", "bf16"} and "bf16 was measured too" in " ".join(both["text"])
