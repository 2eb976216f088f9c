"""An example extension app that contributes demo tools through ``llm_tools``."""
