"""A folder run whose inputs come from a PACS and whose exports go back to one."""
