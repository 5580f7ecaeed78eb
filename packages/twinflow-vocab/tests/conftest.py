"""Make the shared hypothesis strategies (vocab_strategies.py) importable by the tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
