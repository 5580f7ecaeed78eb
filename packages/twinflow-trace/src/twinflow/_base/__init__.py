"""twinflow._base: the workspace's private plumbing, shipped inside the twinflow-trace wheel.

Not an API: every twinflow package may import these modules (the one exception the layer gate
makes to its private-module rule), nobody else should. Standard library only at import time,
like the trace leaf that ships it:

- `_errors`: the root of every twinflow error (`TwinflowError`, `UserError`) and the file
  errors; `twinflow.trace` is their public home.
- `_files`: the one writer of new files, the directory writer lock, `open_inside`.
- `_open`: opening a path named as input (a regular file only, never blocking).
- `_untrusted`: the secret screen and terminal escaping (untrusted text leaves through one door).
- `_yaml`: the bounded reader of the YAML files users write (PyYAML imported on use).
- `_json`: the reader of received JSON text (a key written twice is refused, never last-wins).
- `_code`: the one importer of user code (tools, output types, scorers) by dotted path.
- `_suggest`: the one "did you mean" helper.
"""
