"""Settings every test run shares, wherever pytest is started from the repository root.

Hypothesis: the suite must pass on a busy two-core machine (a CI runner beside other jobs), so
no property test may fail because an example took long to generate or run. The ``twinflow``
profile turns off the two checks that measure wall-clock time (the per-example deadline and the
too-slow health check); every other health check stays on. Set ``HYPOTHESIS_PROFILE=thorough``
for a longer local run with ten times the examples.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("twinflow", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", parent=settings.get_profile("twinflow"), max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "twinflow"))
