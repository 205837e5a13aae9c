// SPDX-License-Identifier: Apache-2.0
//
// Fault injection for the switch's tests, loaded with LD_PRELOAD: operator
// new of JG_NEWFAIL_MIN..JG_NEWFAIL_MAX bytes throws std::bad_alloc while
// the file JG_NEWFAIL_TRIGGER exists, as it would when memory runs out.
// Any other allocation, and every one while the file is absent, is
// malloc's. The test makes the file for the one Write whose failure it
// looks at, so the switch starts and serves as ever otherwise.
#include <cstdlib>
#include <new>

#include <sys/stat.h>

namespace
{

struct Config {
	const char *trigger = nullptr;
	size_t min = 0;
	size_t max = 0;
	Config()
	{
		trigger = std::getenv("JG_NEWFAIL_TRIGGER");
		const char *min_text = std::getenv("JG_NEWFAIL_MIN");
		const char *max_text = std::getenv("JG_NEWFAIL_MAX");
		if (min_text != nullptr && max_text != nullptr) {
			min = std::strtoull(min_text, nullptr, 10);
			max = std::strtoull(max_text, nullptr, 10);
		}
	}
};

// Read on the first allocation, which may come before any constructor of
// the program's own runs.
const Config &config()
{
	static const Config read;
	return read;
}

bool fails(size_t size)
{
	const Config &c = config();
	struct stat st;
	return c.trigger != nullptr && size >= c.min && size <= c.max &&
	       stat(c.trigger, &st) == 0;
}

} // namespace

void *operator new(size_t size)
{
	if (fails(size))
		throw std::bad_alloc();
	void *p = std::malloc(size != 0 ? size : 1);
	if (p == nullptr)
		throw std::bad_alloc();
	return p;
}

void *operator new[](size_t size)
{
	return operator new(size);
}

void operator delete(void *p) noexcept
{
	std::free(p);
}

void operator delete[](void *p) noexcept
{
	std::free(p);
}

void operator delete(void *p, size_t) noexcept
{
	std::free(p);
}

void operator delete[](void *p, size_t) noexcept
{
	std::free(p);
}
