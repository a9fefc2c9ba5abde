"""The long pages bench-long trains on: the review that decides the label where each layout puts it."""

from tests import user_datasets


def test_between_puts_each_review_between_its_movies_plot_and_another_movies():
    table = user_datasets.corpus().to_list()
    plots = {r["text"] for r in table if r["category"] == "plot" and r["text"]}
    ends = user_datasets.long_document_rows(40, layout="end")
    betweens = user_datasets.long_document_rows(40, layout="between")
    assert [r["verdict"] for r in ends] == [r["verdict"] for r in betweens]  # the same reviews, half fresh
    assert sum(r["verdict"] == "fresh" for r in betweens) == 20
    for end, between in zip(ends, betweens, strict=True):
        assert between["page"].startswith(end["page"] + " ")  # the end layout's page, then more
        after = between["page"][len(end["page"]) + 1 :]
        assert after in plots and not end["page"].startswith(after), "another movie's plot follows the review"
