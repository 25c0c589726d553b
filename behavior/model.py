"""model.plan: which configured model route the next model call uses.

Contract. The host calls ``plan(**args)`` before each model call with keyword arguments
describing the turn (for example ``session`` and the attention ``frame``). Return
``{"route": "<route name>"}`` naming a route of the model configuration.

Failure. If this hook raises, returns something that is not JSON or names an unknown
route, the host uses the ``main`` route and records the failure.
"""


def plan(**context: object) -> dict:
    """Always use the ``main`` route.

    >>> plan(session={"id": "default"})
    {'route': 'main'}
    """
    return {"route": "main"}
