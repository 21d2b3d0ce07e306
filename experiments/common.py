"""Names that modules owned elsewhere (bench, reliability, their tests) still import from here.

New code imports from the module for the job: `paths`, `charts`, `report`, `servers`, `runs`.
"""

from experiments.paths import RESULTS, ROOT
from experiments.report import markdown_table
from experiments.servers import mock_process

__all__ = ["RESULTS", "ROOT", "markdown_table", "mock_process"]
