"""Pure parsers and small readers behind the env and deployment probes (standard library only)."""
