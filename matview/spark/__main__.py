"""``python -m matview.spark DB --table …``: the backfill, as spark-submit runs it."""

import sys

from matview.spark.cli import main

sys.exit(main())
