import { Module } from '@nestjs/common';
import type { DynamicModule } from '@nestjs/common';
import type { SampleAppConfig } from '../config/sample-app.config';
import { CrashHook, SAMPLE_CRASH } from './crash-hook';

/** Provides `CrashHook` everywhere (tests only; it does nothing unless `SAMPLE_CRASH_AT` is set). */
@Module({})
export class CrashModule {
  /**
   * @param crash - where to crash and for which keys; undefined never crashes
   */
  static register(crash: SampleAppConfig['crash']): DynamicModule {
    return {
      module: CrashModule,
      global: true,
      providers: [CrashHook, { provide: SAMPLE_CRASH, useValue: crash }],
      exports: [CrashHook],
    };
  }
}
