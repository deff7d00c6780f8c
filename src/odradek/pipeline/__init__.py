"""The data pipeline: a Spark data source for the broker (``source``), ETL transforms (``etl``), the
ClickHouse (chDB) sink (``sink``) and the CDC → ODS → warehouse job (``job``).

Spark, pyarrow and chDB come with the ``pipeline`` extra; nothing here is imported by the broker.
"""
