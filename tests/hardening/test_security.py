"""
The dashboard against a client that misbehaves, the attack reproduced on a real app under the
profiler (docs/security.md):

- the token never travels in a cookie (a cookie would reach every server on 127.0.0.1).
"""
import unittest

from harness import ProfiledApp


class NoCookie(unittest.TestCase):
    """The token never travels in a cookie (cookies are not scoped by port: one would reach every
    server on 127.0.0.1); the page and its files load without it, the API wants it."""

    def test_token_stays_out_of_cookies(self):
        with ProfiledApp("wait", ["--seconds", "60"], env={"CLRSCOPE_TOKEN": "auto"}) as app:
            app.wait_ready()
            token, app.token = app.token, None
            for path in ("/?token=" + token, "/", "/app.js", "/requests.js"):
                status, headers, body = app.request(path)
                self.assertEqual(status, 200, path)
                self.assertNotIn("Set-Cookie", headers, path)
                self.assertNotIn(token.encode(), body, path)
            cookie = {"Cookie": "clrscope_token=" + token}
            self.assertEqual(app.request("/api/v1/status", headers=cookie)[0], 401)
            self.assertEqual(app.request("/api/v1/status")[0], 401)
            self.assertEqual(app.request("/api/v1/status?token=" + token)[0], 200)
            self.assertEqual(app.request("/api/v1/status",
                                         headers={"Authorization": "Bearer " + token})[0], 200)


if __name__ == "__main__":
    unittest.main()
