"""Hidden test suites, one package per assignment and one module per contract part."""
