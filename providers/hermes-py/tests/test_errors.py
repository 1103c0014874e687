"""Classifying non-2xx responses: statuses, body shapes, retry hints, bounds."""

import unittest

from hermes import errors

VLLM_429 = b'{"error":{"message":"Too many requests","type":"RateLimitError","param":null,"code":429}}'


def classify(status, body=b"", headers=()):
    return errors.classify(status, list(headers), body)


class Classify(unittest.TestCase):
    def test_status_defaults(self):
        expected = {429: "rate-limited", 529: "overloaded", 402: "quota-exhausted", 401: "authentication",
                    403: "authentication", 404: "not-found", 408: "transient", 409: "transient", 425: "transient",
                    400: "invalid-request", 413: "invalid-request", 415: "invalid-request",
                    422: "invalid-request", 500: "transient", 502: "transient", 503: "transient",
                    418: "uncorrectable", 302: "uncorrectable"}
        for status, case in expected.items():
            self.assertEqual(classify(status).case, case, status)

    def test_retry_hints(self):
        self.assertEqual(classify(429, VLLM_429, [("Retry-After", "7")]).hint, ("delay-ms", 7000))
        self.assertEqual(classify(429, b"", [("retry-after", "1"), ("retry-after-ms", "250.4")]).hint,
                         ("delay-ms", 250))
        self.assertEqual(classify(503, b"", [("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")]).hint,
                         ("at-unix-ms", 784_111_777_000))
        for junk in ["soon", "-1", "nan", "1e999", "Sun, 31 Feb 1994 08:49:37 GMT"]:
            self.assertIsNone(classify(429, b"", [("retry-after", junk)]).hint, junk)

    def test_vllm_detail_and_flat_shape(self):
        rate = classify(429, VLLM_429, [("retry-after", "3")])
        self.assertEqual(rate.detail, "HTTP 429 type=RateLimitError code=429 message=Too many requests")
        flat = classify(500, b'{"object":"error","message":"boom","type":"InternalServerError","code":500}')
        self.assertEqual((flat.case, flat.detail), ("transient", "HTTP 500 type=InternalServerError code=500 message=boom"))

    def test_context_overflow(self):
        vllm = (b'{"error":{"message":"This model\'s maximum context length is 4096 tokens. However, you requested '
                b'5000 tokens.","type":"BadRequestError","param":null,"code":400}}')
        llama = b'{"error":{"code":400,"message":"too long","type":"exceed_context_size_error"}}'
        self.assertEqual(classify(400, vllm).case, "context-overflow")
        self.assertEqual(classify(400, llama).case, "context-overflow")
        # Prose never turns a retryable status into context overflow.
        self.assertEqual(classify(503, vllm).case, "transient")

    def test_quota_words(self):
        body = b'{"error":{"message":"x","type":"insufficient_quota","code":"insufficient_quota"}}'
        self.assertEqual(classify(429, body).case, "quota-exhausted")

    def test_detail_is_bounded_whatever_the_body(self):
        for body in [b"x" * (1 << 20), ("é" * (1 << 19)).encode(),
                     b'{"error":{"message":"' + b"y" * (1 << 20) + b'"}}', b"\xff" * 5000,
                     b"[" * 100_000, b'{"error":' * 100_000]:
            detail = classify(500, body).detail
            self.assertLessEqual(len(detail.encode("utf-8")), errors.DETAIL_LIMIT)

    def test_in_band_errors(self):
        structured = errors.in_band_error(errors.ErrorFields.parse(VLLM_429))
        self.assertEqual((structured.status, structured.status_from_prose, structured.error_class.case),
                         (429, False, "rate-limited"))
        prose = errors.in_band_error(errors.ErrorFields.parse(b'{"error":{"message":"upstream said 503, sorry"}}'))
        self.assertEqual((prose.status, prose.status_from_prose, prose.error_class.case), (503, True, "transient"))
        self.assertIsNone(errors.status_in_prose("took 1.503 s, id x503, 5030 items"))


if __name__ == "__main__":
    unittest.main()
