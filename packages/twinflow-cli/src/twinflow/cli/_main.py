def main() -> int:
    raise SystemExit("twinflow: not built yet")
