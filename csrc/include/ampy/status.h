/* ampy/status.h — how libampy reports failure.
 *
 * Every libampy function that can fail returns an ampy_status. On failure it
 * also records a human-readable message (naming the argument and the values)
 * in a thread-local buffer, read back with ampy_last_error(). The Python
 * binding maps the status to an exception type and uses the message as its
 * text, so C code never includes Python.h and never aborts the process.
 */
#ifndef AMPY_STATUS_H
#define AMPY_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ampy_status {
    AMPY_OK = 0,
    AMPY_ERR_DTYPE = 1,   /* unsupported or mismatched dtype      -> TypeError    */
    AMPY_ERR_SHAPE = 2,   /* shapes that do not fit / broadcast    -> ValueError   */
    AMPY_ERR_VALUE = 3,   /* a bad argument value (negative lr...) -> ValueError   */
    AMPY_ERR_INDEX = 4,   /* index out of range                    -> IndexError   */
    AMPY_ERR_NOMEM = 5,   /* allocation failed or size overflow    -> MemoryError  */
    AMPY_ERR_RUNTIME = 6, /* anything else (internal, device)      -> RuntimeError */
    AMPY_ERR_DEVICE = 7   /* tensors on the wrong device           -> RuntimeError */
} ampy_status;

/* Record `fmt` (printf-style) as this thread's last error and return `s`,
 * so a failing path reads `return ampy_error(AMPY_ERR_SHAPE, "...", ...);`.
 * Messages longer than 511 bytes are truncated. */
ampy_status ampy_error(ampy_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* This thread's last error message ("" if none). Valid until the next
 * ampy_error() on the same thread. */
const char *ampy_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_STATUS_H */
