"""The suite tests the incremental engine's own refusals: a SELECT it refuses is not recomputed
whole here (`matview.fallback.FALL_BACK_TO_WHOLE`, on for users), except in tests marked
`fall_back_to_whole`. Views with a top-level LIMIT, a window or no FROM (and a LIMIT or window
inside a plain view or derived table) are recomputed whole either way."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from matview import fallback


@pytest.fixture(autouse=True)
def _incremental_refusals(request: pytest.FixtureRequest) -> Iterator[None]:
    fall_back = request.node.get_closest_marker("fall_back_to_whole") is not None
    saved, fallback.FALL_BACK_TO_WHOLE = fallback.FALL_BACK_TO_WHOLE, fall_back
    try:
        yield
    finally:
        fallback.FALL_BACK_TO_WHOLE = saved


@pytest.fixture(scope="session")
def spark() -> Any:
    """One local Spark session for every Spark test (tests/test_spark*.py)."""
    from matview.spark import build_session

    return build_session(
        "local[2]",
        conf={"spark.sql.files.maxPartitionBytes": "16k", "spark.sql.files.openCostInBytes": "1k"},
        fast_start=True,
    )
