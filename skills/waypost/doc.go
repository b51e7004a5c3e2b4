// Package skill holds the generic Waypost Skill (SKILL.md, RFC-0001 §13) and the test that runs every
// worked scenario of it against a real server over MCP.
package skill
