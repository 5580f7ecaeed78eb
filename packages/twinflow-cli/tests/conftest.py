"""Make the shared CLI test kit importable."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
