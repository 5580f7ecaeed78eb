"""Make the shared test kit importable (also by dotted path, as custom scorers are named)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
