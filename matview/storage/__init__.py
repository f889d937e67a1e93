"""What matview keeps in the user's file: the catalog, view tables, operator state, change
capture (triggers and delta logs), matview-owned indexes, the plain SQL views other clients
read, and what the file's schema says about a base table.
"""
