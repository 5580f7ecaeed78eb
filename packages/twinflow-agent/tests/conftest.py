"""The agent test kit (``agent_testkit``) importable by the tests beside it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
