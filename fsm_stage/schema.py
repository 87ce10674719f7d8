"""The JSON Schema of stage-graph files; the code lives in ``fsm_stage.config.schema``."""

from fsm_stage.config.schema import SCHEMA_DIALECT, SCHEMA_FILE_NAME, SCHEMA_ID, json_schema, schema_text

__all__ = ["SCHEMA_DIALECT", "SCHEMA_FILE_NAME", "SCHEMA_ID", "json_schema", "schema_text"]
