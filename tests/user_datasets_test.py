"""The long pages bench-long trains on: the review that decides the label where each layout puts it."""

from tests import user_datasets


def test_between_puts_each_review_between_two_plots_of_other_movies():
    table = user_datasets.corpus().to_list()
    plots = {r["movie_name"]: r["text"] for r in table if r["category"] == "plot" and r["text"]}
    ends = user_datasets.long_document_rows(40, layout="end")
    betweens = user_datasets.long_document_rows(40, layout="between")
    assert [r["verdict"] for r in ends] == [r["verdict"] for r in betweens]  # the same reviews, half fresh
    assert sum(r["verdict"] == "fresh" for r in betweens) == 20
    for end, between in zip(ends, betweens, strict=True):
        (own,) = [movie for movie, plot in plots.items() if end["page"].startswith(plot + " ")]
        review = end["page"][len(plots[own]) + 1 :]
        around = [movie for movie, plot in plots.items() if between["page"].startswith(plot + f" {review} ")]
        (before,) = around
        (after,) = [m for m, plot in plots.items() if between["page"] == f"{plots[before]} {review} {plot}"]
        assert own not in (before, after) and before != after, "two other movies' plots around the review"


def test_alone_is_each_review_of_the_other_layouts_with_nothing_around_it():
    ends = user_datasets.long_document_rows(40, layout="end")
    alone = user_datasets.long_document_rows(40, layout="alone")
    assert [r["verdict"] for r in alone] == [r["verdict"] for r in ends]
    for end, review in zip(ends, alone, strict=True):
        assert end["page"].endswith(" " + review["page"]) and len(review["page"]) < len(end["page"]) / 2
