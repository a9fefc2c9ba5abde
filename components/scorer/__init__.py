"""BatchScorer and `hftfx predict --input`: unlabeled rows scored by a pushed model in Beam."""
