"""The CLI test kit on the path. The Ray fixture (``ray_executor``) is the root conftest.py's."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
