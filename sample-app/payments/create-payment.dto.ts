import {
  IsInt,
  IsNotEmpty,
  IsOptional,
  IsPositive,
  IsString,
  Matches,
  Max,
  MaxLength,
} from 'class-validator';

/** Body of `POST /payments`. */
export class CreatePaymentDto {
  /** Minor units (cents), a positive integer. */
  @IsInt()
  @IsPositive()
  @Max(2_147_483_647)
  amount!: number;

  /** ISO 4217 code in lower case, e.g. `eur`. */
  @Matches(/^[a-z]{3}$/, { message: 'currency must be 3 lowercase letters' })
  currency!: string;

  /** The provider's customer; some misbehave on purpose (see the README). */
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  customerId!: string;

  @IsOptional()
  @IsString()
  @MaxLength(1000)
  description?: string;
}
