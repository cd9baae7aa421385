"""Unit tests: `python3 -m unittest` in this directory."""

import unittest

from rules import decide


class RulesTest(unittest.TestCase):
    def test_denies_configured_phrases_only(self):
        bash = lambda c: decide("PreToolUse", "Bash", {"command": c}, None)
        self.assertIsNotNone(bash("sudo rm -rf / --no-preserve-root"))
        self.assertIsNone(bash("rm -rf ./target"))
        self.assertIsNone(decide("PreToolUse", "Edit", {"file_path": "x"}, None))
        self.assertIsNotNone(decide("PreToolUse", "Bash", {"command": "make deploy"}, {"deny": ["deploy"]}))

    def test_bad_config_is_an_error(self):
        with self.assertRaises(ValueError):
            decide("PreToolUse", "Bash", {"command": "ls"}, {"deny": "x"})


if __name__ == "__main__":
    unittest.main()
