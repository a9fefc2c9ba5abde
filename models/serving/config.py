"""The `serving` config section: what `hftfx serve` and `hftfx predict --input` keep for `hftfx monitor`.

Off unless log_dir is set; each key also has its flag on both commands (`--log-dir`, `--log-sample`, ...), which
wins over the config.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from models.config_section import ConfigSection
from models.serving.prediction_log import TEXT_MODES, LogSettings


class ServingConfig(ConfigSection):
    """The prediction log of `hftfx serve` and `hftfx predict --input` (models/serving/prediction_log.py)."""

    log_dir: str = Field(
        "", description="write sampled texts and answers here, a folder a version, for `hftfx monitor` (empty: off)"
    )
    log_sample: float = Field(1.0, gt=0, le=1, description="the share of rows logged, e.g. 0.1 for one row in 10")
    log_texts: Literal[TEXT_MODES] = Field("full", description="hash: keep each text's SHA-256 and length, not it")
    log_max_mb: float = Field(1024.0, gt=0, description="the log folder's size cap, past which the oldest shards go")
    log_retention_days: float = Field(30.0, gt=0, description="shards older than this go")

    def log_settings(self) -> LogSettings | None:
        """The log these keys ask for, or None (log_dir empty)."""
        if not self.log_dir:
            return None
        return LogSettings(self.log_dir, self.log_sample, self.log_texts, self.log_max_mb, self.log_retention_days)
