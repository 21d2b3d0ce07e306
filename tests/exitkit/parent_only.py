"""An adapter module that imports in the kit's process but not in its child (a dependency the
child's environment lacks): the kit must say so, not blame the agent."""

import os
import sys

from file_loop import FileLoop

if sys.argv and sys.argv[0].endswith(os.path.join("exitkit", "child.py")):
    raise ImportError("parent_only: this module is missing in the new process")


class ParentOnly(FileLoop):
    name = "parent only"
