/* vmath.c — the portable build of vmath_impl.inc and the dispatch by CPU
 * level (see vmath.h). Plain C: no FMA, so VM_MADD is a multiply and an
 * add; the algorithms are built to meet their error bound either way.
 * no-trapping-math lets GCC if-convert the selects (see vmath_x86.c).
 */
#include <stdint.h>
#include <string.h>

#include "ampy/cpu.h"
#include "vmath.h"

#define VM_SFX portable
#define VM_ATTR __attribute__((optimize("no-trapping-math")))
#define VM_MADD(a, b, c) ((a) * (b) + (c))
#define VM_DMADD(a, b, c) ((a) * (b) + (c))
#include "vmath_impl.inc"
#undef VM_SFX
#undef VM_ATTR
#undef VM_MADD
#undef VM_DMADD

const ampy_vm_table *ampy_vm(void)
{
    if (ampy_cpu_level_get() >= AMPY_CPU_AVX512) {
        const ampy_vm_table *t = ampy_vm_avx512();
        if (t)
            return t;
    }
    return &vm_table_portable;
}
