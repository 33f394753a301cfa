"""A minimal Lambda Runtime API loop for the Python peer: what the managed
runtime's client does, without its extras. Init is the import of the
handler (boto3 and its client); then GET /next, handle, POST the response,
over one keep-alive connection."""

import http.client
import json
import os
import sys
import traceback

API = "/2018-06-01/runtime"


def main():
    host, port = os.environ["AWS_LAMBDA_RUNTIME_API"].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port))
    try:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import handler
    except BaseException as err:  # report, as the managed runtime does
        body = json.dumps({"errorMessage": str(err), "errorType": type(err).__name__}).encode()
        conn.request("POST", f"{API}/init/error", body=body, headers={"Content-Type": "application/json"})
        conn.getresponse().read()
        raise
    while True:
        conn.request("GET", f"{API}/invocation/next")
        response = conn.getresponse()
        event = response.read()
        request_id = response.getheader("Lambda-Runtime-Aws-Request-Id")
        headers = {"Content-Type": "application/json"}
        # Echoed exactly as received, as the managed runtimes do.
        if invocation_id := response.getheader("Lambda-Runtime-Invocation-Id"):
            headers["Lambda-Runtime-Invocation-Id"] = invocation_id
        try:
            body = json.dumps(handler.handle(json.loads(event), request_id)).encode()
            path = f"{API}/invocation/{request_id}/response"
        except Exception as err:
            traceback.print_exc()
            body = json.dumps({"errorMessage": str(err), "errorType": type(err).__name__}).encode()
            path = f"{API}/invocation/{request_id}/error"
        conn.request("POST", path, body=body, headers=headers)
        conn.getresponse().read()


if __name__ == "__main__":
    main()
