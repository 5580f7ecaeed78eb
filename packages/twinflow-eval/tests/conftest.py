"""The shared test kit importable (also by dotted path, as custom scorers are named).

The Ray fixture (``ray_executor``) is the workspace's one, in the root conftest.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
