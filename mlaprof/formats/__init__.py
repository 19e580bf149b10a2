"""Format knowledge shared by importers and exporters (the rocpd schema)."""
