"""MCP servers as nbchat tools: which servers may start, their sessions, their tools.

A tool a server does not mark read-only waits for the person's answer like
any client tool; what may start is capped by the administrator's allowlist.
"""
