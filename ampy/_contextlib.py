"""Context managers used as decorators (autocast, no_grad, enable_grad, ...).

``decorate(ctx, func)`` runs ``func`` inside ``with ctx:``. For a coroutine
function the region spans the whole await; for a generator function (also an
async one) it is entered around each step of the generator only (as torch's
``torch.utils._contextlib`` does for grad mode), so a suspended generator
never leaves its state on for the code that consumes it.
``ctx`` must be re-enterable (ampy's context managers keep no state on self).
"""
import functools
import inspect


def _wrap_generator(ctx, func):
    @functools.wraps(func)
    def generator_context(*args, **kwargs):
        with ctx:
            gen = func(*args, **kwargs)
        try:
            with ctx:
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with ctx:
                        gen.close()
                    raise
                except BaseException as exc:
                    with ctx:
                        response = gen.throw(exc)
                else:
                    with ctx:
                        response = gen.send(request)
        except StopIteration as stop:
            return stop.value

    return generator_context


def _wrap_async_generator(ctx, func):
    @functools.wraps(func)
    async def async_generator_context(*args, **kwargs):
        with ctx:
            gen = func(*args, **kwargs)
        try:
            with ctx:
                response = await gen.asend(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with ctx:
                        await gen.aclose()
                    raise
                except BaseException as exc:
                    with ctx:
                        response = await gen.athrow(exc)
                else:
                    with ctx:
                        response = await gen.asend(request)
        except StopAsyncIteration:
            return

    return async_generator_context


def decorate(ctx, func):
    if inspect.isgeneratorfunction(func):
        return _wrap_generator(ctx, func)
    if inspect.isasyncgenfunction(func):
        return _wrap_async_generator(ctx, func)
    if inspect.iscoroutinefunction(func):
        @functools.wraps(func)
        async def async_context(*args, **kwargs):
            with ctx:
                return await func(*args, **kwargs)
        return async_context

    @functools.wraps(func)
    def context(*args, **kwargs):
        with ctx:
            return func(*args, **kwargs)
    return context
