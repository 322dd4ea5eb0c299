#pragma once
// The three classes of code points GPT-2's pre-tokenizer pattern tells apart: letters (\p{L}),
// numbers (\p{N}) and white space (\s, Unicode's White_Space property), everything else being
// "other". Letters and numbers come from a table generated from Unicode's database
// (unicode_class_table.inc, by scripts/reference/unicode_classes.py); ASCII is answered without it.

namespace troupe::compute {

enum class CodePointClass { letter, number, space, other };

CodePointClass code_point_class(char32_t code_point);

}  // namespace troupe::compute
