"""Pure data: probed values, facts, findings and reports. Imports nothing else from envdoctor."""
